import { type App, authOf } from '../../http/app';
import { errorResponses } from '../../http/schemas';
import type { Provider } from '../providers/repository';
import type { ProviderService } from '../providers/service';
import { Merchant, MerchantUpdate } from './schemas';

export function toMerchant(p: Provider): Merchant {
  const optional = {
    companyNumber: p.companyNumber,
    country: p.country,
    defaultCurrency: p.defaultCurrency,
    iconUrl: p.iconUrl,
    logoUrl: p.logoUrl,
    brandColor: p.brandColor,
    privacyUrl: p.privacyUrl,
    termsUrl: p.termsUrl,
    statementDescriptor: p.statementDescriptor,
    supportedTopupCurrencies: p.supportedTopupCurrencies,
    supportEmail: p.supportEmail,
    supportUrl: p.supportUrl,
    taxId: p.taxId,
    vatNumber: p.vatNumber,
    address: p.address,
  };
  return {
    displayName: p.displayName,
    legalName: p.legalName,
    ...Object.fromEntries(Object.entries(optional).filter(([, value]) => value !== null)),
  };
}

export function merchantRoutes(providers: ProviderService) {
  return async (app: App) => {
    app.get(
      '/v1/sdk/merchant',
      {
        schema: {
          tags: ['merchant'],
          summary: 'The merchant identity shown to customers',
          response: { 200: Merchant, ...errorResponses },
        },
      },
      async (request) => toMerchant(await providers.get(authOf(request).providerId)),
    );
    app.patch(
      '/v1/sdk/merchant',
      {
        schema: {
          tags: ['merchant'],
          summary: 'Edit the merchant identity shown to customers',
          body: MerchantUpdate,
          response: { 200: Merchant, ...errorResponses },
        },
      },
      async (request) => toMerchant(await providers.updateMerchant(authOf(request).providerId, request.body)),
    );
  };
}
